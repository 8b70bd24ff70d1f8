"""Answering a question: recall (the two legs, fusion, the floor and the regime), the
confidence models, staleness, reranking, the deadline, and "why not this one?"."""

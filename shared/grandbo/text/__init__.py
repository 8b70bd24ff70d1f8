"""Text rules shared by every part: what a stored string may contain, and the tokenizer
that turns text into tags."""

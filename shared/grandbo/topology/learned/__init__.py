"""The learned graph: what incidents taught (Incident nodes, AFFECTS, CORRELATES_WITH in
the `learned` namespace), and what the topology's time axis says about a lesson's service
since it was written (staleness)."""

"""The memory core, by role: the domain's models and rules (`domain/`), the repository that
holds their SQL (`repository/`), what is derived from the text (`vectors/`), answering a
question (`read/`), the write path holding recall (`service.py`), and what works through
the service (`incidents.py`, `curation/`, `lifecycle/`). Each imports only those before it
in that list (import-linter's layers in pyproject.toml)."""

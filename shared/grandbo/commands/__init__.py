"""`grandbo` commands that have grown a module of their own (the CLI registers them)."""

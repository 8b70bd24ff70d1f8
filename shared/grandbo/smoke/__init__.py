"""`grandbo smoke`: one command that proves a deployed stage works (issue 35, point 7)."""

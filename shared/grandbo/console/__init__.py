"""The curation console: server-rendered pages over the signed admin API (`grandbo console`)."""

"""PostgreSQL plumbing shared by the memory and topology stores: connections and the
tenant scope every repository runs in."""

-- Field weighting on the lexical leg (issue 13, item 2; docs/EVAL.md, "Rank deeper"):
-- a tag the entry's title carries counts as said TITLE_TAG_TF times in BM25. The write
-- path and the rebuild set `in_title` from the same tokenizer that tags the entry.
-- Postings written before this migration hold NULL (not known): they rank as before
-- (tf 1) until the backfill fills them (`grandbo rebuild`, the scheduled backfill and the
-- local runner's start fill them in batches, `MemoryService.mark_title_tags`).
ALTER TABLE org_memory_tag_postings ADD COLUMN in_title boolean;

-- The lexical leg reads postings index-only: the flag joins the covering columns.
ALTER TABLE org_memory_tag_postings DROP CONSTRAINT org_memory_tag_postings_pkey;
ALTER TABLE org_memory_tag_postings ADD PRIMARY KEY (tenant_id, tag, entry_id)
    INCLUDE (tag_count, service, updated_at, in_title);

-- What the backfill has left to fill, found without a scan.
CREATE INDEX org_memory_tag_postings_unmarked ON org_memory_tag_postings (tenant_id, entry_id)
    WHERE in_title IS NULL;
GRANT UPDATE (in_title) ON org_memory_tag_postings TO grandbo_app;

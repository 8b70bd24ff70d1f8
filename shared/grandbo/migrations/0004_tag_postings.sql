-- Lexical leg at scale: an inverted index of active entries' tags (tag -> entries), so
-- BM25 reads narrow postings instead of every candidate entry's heap row (each carries
-- a 4 KB vector inline). Kept current by the write path in the same transaction as the
-- projection; rebuilt with it. Plus a narrow covering index for vector coverage counts.

CREATE TABLE org_memory_tag_postings (
    tenant_id  text        NOT NULL,
    tag        text        NOT NULL,
    entry_id   uuid        NOT NULL,
    tag_count  integer     NOT NULL CHECK (tag_count >= 1),
    service    text,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, tag, entry_id) INCLUDE (tag_count, service, updated_at)
);
CREATE INDEX org_memory_tag_postings_entry ON org_memory_tag_postings (tenant_id, entry_id);

INSERT INTO org_memory_tag_postings (tenant_id, tag, entry_id, tag_count, service, updated_at)
SELECT e.tenant_id, t.tag, e.entry_id, cardinality(e.tags), e.service, e.updated_at
FROM org_memory_entries e CROSS JOIN LATERAL unnest(e.tags) AS t(tag)
WHERE e.status = 'active'
ON CONFLICT DO NOTHING;

ALTER TABLE org_memory_tag_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_tag_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_tag_postings
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, DELETE ON org_memory_tag_postings TO grandbo_app;

CREATE INDEX org_memory_entries_coverage ON org_memory_entries (tenant_id, status)
    INCLUDE (embed_rev, embedded_revision, revision, service);
DROP INDEX org_memory_entries_active;

-- Vectors in half precision (issue 16, item 3): halfvec(1024) keeps the 1,024-dimension
-- contract at 2 bytes a dimension. Measured against vector(1024) in one run
-- (`bench/halfvec.py`, docs/BENCHMARKS.md): the table and its HNSW index less than half
-- the size, the exact scan of 50,000 entries ~45 % faster, HNSW recall@25 against the
-- float32 top 25 0.992, retrieval quality on the development eval unchanged (docs/EVAL.md).
--
-- The per-tenant HNSW indexes are built on vector_cosine_ops and cannot follow the type:
-- they are dropped here and rebuilt on halfvec_cosine_ops by the hourly index job of the
-- migrations function (ensure_hnsw_indexes; locally `grandbo index`). Until then those
-- tenants' queries scan exactly. The type change rewrites both tables under an exclusive
-- lock (docs/OPERATIONS.md).
DO $$
DECLARE
    hnsw record;
BEGIN
    FOR hnsw IN
        SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'org_memory_entries'::regclass
          AND c.relname LIKE 'org\_memory\_entries\_hnsw\_%'
    LOOP
        EXECUTE format('DROP INDEX %I', hnsw.relname);
    END LOOP;
END $$;

-- scaled to unit length first (cosine distance does not see length): a stored value past
-- half precision's range, or a vector so short its components round to 0, converts whole
ALTER TABLE org_memory_entries
    ALTER COLUMN embedding TYPE halfvec(1024) USING l2_normalize(embedding)::halfvec(1024);
ALTER TABLE org_memory_entries ALTER COLUMN embedding SET STORAGE PLAIN;
ALTER TABLE org_memory_staged_vectors
    ALTER COLUMN embedding TYPE halfvec(1024) USING l2_normalize(embedding)::halfvec(1024);
ALTER TABLE org_memory_staged_vectors ALTER COLUMN embedding SET STORAGE PLAIN;

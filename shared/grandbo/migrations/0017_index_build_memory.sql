-- The HNSW index job's build memory (grandbo.memory.vector_index) as the schema owner's
-- default in this database, instead of a session-level SET on the job's connection: a
-- session SET pins the job's session in RDS Proxy, and through a transaction pooler it
-- lands on whichever backend served that statement (not necessarily the one that then
-- builds the index) and stays there for every later client of it. A graph that outgrows
-- maintenance_work_mem is built on disk, much slower; 1 GB holds a 50,000-entry
-- organization's (130 MB, docs/BENCHMARKS.md) several times over. It reaches connections
-- opened after this migration: the job and the migrations run as this role (the admin
-- secret in AWS, `grandbo index` locally).
DO $$
BEGIN
    EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET maintenance_work_mem = %L',
                   current_database(), '1GB');
END
$$;

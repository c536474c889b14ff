-- An index of runs' inputs, so an input filter (`?input.customer=42`) reads the runs that hold one
-- of its values instead of every run. For an input that is an object, a row for each scalar it
-- holds under objects only (not inside an array), keyed by its place (`.address.city`), its JSON
-- kind and its value as text (a number with its scale trimmed, so `42.0` is `42`, as `@>`
-- compares them), then the run in list order. Places and values of more than 256 characters are
-- left out. An input with more than 64 scalars gets one row of kind `many` instead, and while
-- any run has one, input filters read every run (a run's index rows cost a write each). A filter
-- makes the key of one of its own values through the same function and still checks the whole
-- input with `@>`, so the index only has to hold every run that can match: it may hold more.
CREATE FUNCTION {schema}.input_leaves(text) RETURNS TABLE (leaf_path text, leaf_kind text, leaf_value text)
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH RECURSIVE walk(place, doc) AS (
        SELECT ''::text, d FROM (SELECT $1::jsonb AS d) AS input WHERE jsonb_typeof(d) = 'object'
        UNION ALL
        SELECT walk.place || '.' || e.key, e.value FROM walk, jsonb_each(walk.doc) AS e
        WHERE jsonb_typeof(walk.doc) = 'object'
    ), leaves AS (
        SELECT place, jsonb_typeof(doc) AS kind,
               CASE jsonb_typeof(doc) WHEN 'number' THEN trim_scale((doc #>> '{}')::numeric)::text
                   ELSE coalesce(doc #>> '{}', '') END AS value
        FROM walk WHERE jsonb_typeof(doc) NOT IN ('object', 'array')
    )
    SELECT place, kind, value FROM leaves WHERE length(place) <= 256 AND length(value) <= 256
$$;
-- How many scalars an input holds, anywhere.
CREATE FUNCTION {schema}.input_scalars(text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT count(*) FROM jsonb_path_query($1::jsonb, 'strict $.**') AS v
    WHERE jsonb_typeof(v) NOT IN ('object', 'array')
$$;
CREATE TABLE {schema}.run_inputs (
        path TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL,
        value TEXT COLLATE "C" NOT NULL,
        at BIGINT NOT NULL,
        run TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (path, kind, value, at, run)
    );
CREATE FUNCTION {schema}.index_run_inputs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM {schema}.run_inputs i
            USING (SELECT leaf_path, leaf_kind, leaf_value FROM {schema}.input_leaves(OLD.input)
                   UNION ALL SELECT '', 'many', '') AS l
            WHERE i.path = l.leaf_path AND i.kind = l.leaf_kind AND i.value = l.leaf_value
              AND i.at = OLD.created_at AND i.run = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' AND left(ltrim(NEW.input), 1) = '{' THEN
        IF {schema}.input_scalars(NEW.input) <= 64 THEN
            INSERT INTO {schema}.run_inputs (path, kind, value, at, run)
                SELECT leaf_path, leaf_kind, leaf_value, NEW.created_at, NEW.id FROM {schema}.input_leaves(NEW.input)
                ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO {schema}.run_inputs (path, kind, value, at, run) VALUES ('', 'many', '', NEW.created_at, NEW.id)
                ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER run_inputs_insert AFTER INSERT ON {schema}.runs
    FOR EACH ROW WHEN (left(ltrim(NEW.input), 1) = '{') EXECUTE FUNCTION {schema}.index_run_inputs();
CREATE TRIGGER run_inputs_delete AFTER DELETE ON {schema}.runs
    FOR EACH ROW WHEN (left(ltrim(OLD.input), 1) = '{') EXECUTE FUNCTION {schema}.index_run_inputs();
-- A debounced start that joins a waiting run replaces its input.
CREATE TRIGGER run_inputs_update AFTER UPDATE OF input ON {schema}.runs
    FOR EACH ROW WHEN (OLD.input IS DISTINCT FROM NEW.input) EXECUTE FUNCTION {schema}.index_run_inputs();
-- The runs a schema from an earlier build holds, but for inputs with a NUL (`\u0000`, which
-- `jsonb` cannot hold; no build takes them now, and `@>` can never match them).
INSERT INTO {schema}.run_inputs (path, kind, value, at, run)
    SELECT l.leaf_path, l.leaf_kind, l.leaf_value, r.created_at, r.id
    FROM (SELECT id, created_at, input FROM {schema}.runs
          WHERE left(ltrim(input), 1) = '{' AND input !~ '(^|[^\\])(\\\\)*\\u0000' OFFSET 0) AS r,
         {schema}.input_leaves(r.input) AS l
    WHERE {schema}.input_scalars(r.input) <= 64
    ON CONFLICT DO NOTHING;
INSERT INTO {schema}.run_inputs (path, kind, value, at, run)
    SELECT '', 'many', '', r.created_at, r.id
    FROM (SELECT id, created_at, input FROM {schema}.runs
          WHERE left(ltrim(input), 1) = '{' AND input !~ '(^|[^\\])(\\\\)*\\u0000' OFFSET 0) AS r
    WHERE {schema}.input_scalars(r.input) > 64
    ON CONFLICT DO NOTHING;

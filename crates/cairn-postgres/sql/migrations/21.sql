-- An index of runs' inputs, so an input filter (`?input.customer=42`) reads the runs that hold one
-- of its values instead of every run. For an input that is an object, a row for each scalar it
-- holds under objects only (not inside an array), keyed by its place (`.address.city`), its JSON
-- kind and its value as text (a number with its scale trimmed, so `42.0` is `42`, as `@>`
-- compares them), then the run in list order. Places and values of more than 256 characters are
-- left out. An input with more than 64 such keys gets one row of kind `many` instead, and while
-- any run has one, input filters read every run (a run's index rows cost a write each). A filter
-- makes the key of one of its own values through the same function (`input_keys`) and still
-- checks the whole input with `@>`, so the index only has to hold every run that can match: it
-- may hold more.

-- An input's keys, as three arrays (paths, kinds, values); none when it is not an object. PL/pgSQL
-- walking the objects with a stack: a recursive SQL query planned at each call cost the trigger
-- several times more.
CREATE FUNCTION {schema}.input_keys(text, OUT paths text[], OUT kinds text[], OUT vals text[])
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    places text[] := ARRAY[''];
    docs jsonb[] := ARRAY[$1::jsonb];
    place text;
    node jsonb;
    member record;
    kind text;
    path text;
    val text;
BEGIN
    paths := '{}';
    kinds := '{}';
    vals := '{}';
    IF jsonb_typeof(docs[1]) <> 'object' THEN
        RETURN;
    END IF;
    WHILE cardinality(docs) > 0 LOOP
        place := places[cardinality(places)];
        node := docs[cardinality(docs)];
        places := trim_array(places, 1);
        docs := trim_array(docs, 1);
        FOR member IN SELECT key, value FROM jsonb_each(node) LOOP
            kind := jsonb_typeof(member.value);
            IF kind = 'object' THEN
                places := places || (place || '.' || member.key);
                docs := docs || member.value;
            ELSIF kind <> 'array' THEN
                path := place || '.' || member.key;
                val := CASE kind WHEN 'number' THEN trim_scale((member.value #>> '{}')::numeric)::text
                    ELSE coalesce(member.value #>> '{}', '') END;
                IF length(path) <= 256 AND length(val) <= 256 THEN
                    paths := paths || path;
                    kinds := kinds || kind;
                    vals := vals || val;
                END IF;
            END IF;
        END LOOP;
    END LOOP;
END
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
DECLARE
    keys record;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        keys := {schema}.input_keys(OLD.input);
        DELETE FROM {schema}.run_inputs i
            USING unnest(array_append(keys.paths, ''), array_append(keys.kinds, 'many'), array_append(keys.vals, ''))
                AS l(p, k, v)
            WHERE i.path = l.p AND i.kind = l.k AND i.value = l.v AND i.at = OLD.created_at AND i.run = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        keys := {schema}.input_keys(NEW.input);
        IF cardinality(keys.paths) > 64 THEN
            INSERT INTO {schema}.run_inputs (path, kind, value, at, run) VALUES ('', 'many', '', NEW.created_at, NEW.id)
                ON CONFLICT DO NOTHING;
        ELSIF cardinality(keys.paths) > 0 THEN
            INSERT INTO {schema}.run_inputs (path, kind, value, at, run)
                SELECT l.p, l.k, l.v, NEW.created_at, NEW.id FROM unnest(keys.paths, keys.kinds, keys.vals) AS l(p, k, v)
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
    SELECT DISTINCT CASE WHEN few THEN l.p ELSE '' END, CASE WHEN few THEN l.k ELSE 'many' END,
           CASE WHEN few THEN l.v ELSE '' END, r.created_at, r.id
    FROM (SELECT id, created_at, input FROM {schema}.runs
          WHERE left(ltrim(input), 1) = '{' AND input !~ '(^|[^\\])(\\\\)*\\u0000' OFFSET 0) AS r,
         LATERAL {schema}.input_keys(r.input) AS k,
         LATERAL (SELECT cardinality(k.paths) <= 64) AS c(few),
         LATERAL unnest(k.paths, k.kinds, k.vals) AS l(p, k, v)
    ON CONFLICT DO NOTHING;

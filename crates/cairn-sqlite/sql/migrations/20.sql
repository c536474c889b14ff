-- An index of runs' inputs, so an input filter (`?input.customer=42`) reads the runs that hold one
-- of its values instead of every run. For an input that is an object, a row for each scalar it
-- holds under objects only (not inside an array), keyed by its place (SQLite's JSON path,
-- `$.address.city`), its kind (`number` whatever the JSON wrote, `text`, `true`, `false`, `null`)
-- and its value (numbers as REAL, as `cairn_json_contains` compares them), then the run in list
-- order. Places and texts of more than 256 characters are left out. An input with more than 64
-- such keys gets one row of kind `many` instead, and while any run has one, input filters read
-- every run (a run's index rows cost a write each). A filter makes the key of one of its own
-- values with the same selection and still checks the whole input, so the index only has to
-- hold every run that can match: it may hold more.
CREATE TABLE run_inputs (
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    value NOT NULL,
    at INTEGER NOT NULL,
    run TEXT NOT NULL,
    PRIMARY KEY (path, kind, value, at, run)
) WITHOUT ROWID;
-- SQLite allows no common table expression in a trigger, so each trigger below names the
-- selection of an input's keys in full, as does the store's `input_leaf` for a filter.
CREATE TRIGGER run_inputs_insert AFTER INSERT ON runs WHEN json_type(new.input) = 'object' BEGIN
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
               CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END,
               new.created_at, new.id
        FROM json_tree(new.input)
        WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256
          AND (type <> 'text' OR length(atom) <= 256)
          AND (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) <= 64;
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT '', 'many', 0, new.created_at, new.id
        WHERE (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) > 64;
END;
CREATE TRIGGER run_inputs_delete AFTER DELETE ON runs WHEN json_type(old.input) = 'object' BEGIN
    DELETE FROM run_inputs WHERE at = old.created_at AND run = old.id AND (path, kind, value) IN (
        SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
               CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END
        FROM json_tree(old.input)
        WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256
          AND (type <> 'text' OR length(atom) <= 256)
        UNION ALL SELECT '', 'many', 0);
END;
-- A debounced start that joins a waiting run replaces its input: its old keys go, its new come.
CREATE TRIGGER run_inputs_update AFTER UPDATE OF input ON runs WHEN old.input IS NOT new.input BEGIN
    DELETE FROM run_inputs WHERE at = old.created_at AND run = old.id AND json_type(old.input) = 'object'
        AND (path, kind, value) IN (
            SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
                   CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END
            FROM json_tree(old.input)
            WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256
              AND (type <> 'text' OR length(atom) <= 256)
            UNION ALL SELECT '', 'many', 0);
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
               CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END,
               new.created_at, new.id
        FROM json_tree(new.input)
        WHERE json_type(new.input) = 'object' AND type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0
          AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)
          AND (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) <= 64;
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT '', 'many', 0, new.created_at, new.id
        WHERE json_type(new.input) = 'object'
          AND (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) > 64;
END;
-- The runs a database from an earlier build holds (an input that is not JSON has no keys).
INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
    SELECT t.fullkey, CASE WHEN t.type IN ('integer', 'real') THEN 'number' ELSE t.type END,
           CASE t.type WHEN 'integer' THEN CAST(t.atom AS REAL) WHEN 'real' THEN t.atom WHEN 'text' THEN t.atom ELSE 0 END,
           r.created_at, r.id
    FROM (SELECT id, created_at, input FROM runs WHERE json_valid(input) AND json_type(input) = 'object'
            AND (SELECT count(*) FROM json_tree(input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) <= 64) AS r,
         json_tree(r.input) AS t
    WHERE t.type NOT IN ('object', 'array') AND instr(t.fullkey, '[') = 0 AND length(t.fullkey) <= 256
      AND (t.type <> 'text' OR length(t.atom) <= 256);
INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
    SELECT '', 'many', 0, created_at, id FROM runs WHERE json_valid(input) AND json_type(input) = 'object'
        AND (SELECT count(*) FROM json_tree(input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) > 64;

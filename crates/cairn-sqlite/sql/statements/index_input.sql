-- The input index's rows of run ?3 (created at ?2) with input ?1: the selection migration 20 names
-- (a row for each scalar of an object input under objects only, places and texts of at most 256
-- characters), or one row of kind `many` when there are more than 64 of them.
WITH keys AS (
    SELECT fullkey AS path, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END AS kind,
           CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END
               AS value
    FROM json_tree(?1)
    WHERE json_type(?1) = 'object' AND type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0
      AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)
), counted AS (SELECT count(*) AS n FROM keys)
INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
    SELECT path, kind, value, ?2, ?3 FROM keys, counted WHERE n <= 64
    UNION ALL SELECT '', 'many', 0, ?2, ?3 FROM counted WHERE n > 64

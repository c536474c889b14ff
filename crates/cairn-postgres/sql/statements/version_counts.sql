-- Each unended status read through the partial index that holds it (one scan of the whole table
-- otherwise: 176 ms at 1,000,000 ended runs, against 0.15 ms).
SELECT workflow, version, count(*) FROM (
    SELECT workflow, version FROM runs WHERE status = 'running'
    UNION ALL SELECT workflow, version FROM runs WHERE status = 'suspended'
    UNION ALL SELECT workflow, version FROM runs WHERE status = 'pending' AND waiting_for IS NULL
    UNION ALL SELECT workflow, version FROM runs WHERE status = 'pending' AND waiting_for IS NOT NULL
) AS open GROUP BY workflow, version ORDER BY workflow, version

WITH moved AS (DELETE FROM ended_deltas RETURNING workflow, status, runs)
                 INSERT INTO ended_counts AS c (workflow, status, runs)
                 SELECT workflow, status, sum(runs) FROM moved GROUP BY workflow, status ORDER BY workflow, status
                 ON CONFLICT (workflow, status) DO UPDATE SET runs = c.runs + excluded.runs
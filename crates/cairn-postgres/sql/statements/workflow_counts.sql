SELECT workflow, status, sum(runs)::BIGINT FROM (
                     SELECT workflow, status, runs FROM ended_counts
                     UNION ALL SELECT workflow, status, runs FROM ended_deltas
                     UNION ALL SELECT workflow, 'pending', count(*) FROM runs WHERE status = 'pending' AND waiting_for IS NULL GROUP BY workflow
                     UNION ALL SELECT workflow, 'pending', count(*) FROM runs WHERE status = 'pending' AND waiting_for IS NOT NULL GROUP BY workflow
                     UNION ALL SELECT workflow, 'running', count(*) FROM runs WHERE status = 'running' GROUP BY workflow
                     UNION ALL SELECT workflow, 'suspended', count(*) FROM runs WHERE status = 'suspended' GROUP BY workflow
                     UNION ALL SELECT workflow, 'paused', count(*) FROM runs WHERE status = 'paused' GROUP BY workflow
                 ) counts GROUP BY workflow, status HAVING sum(runs) > 0 ORDER BY workflow, status COLLATE "C"
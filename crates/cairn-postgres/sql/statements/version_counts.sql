SELECT workflow, version, count(*) FROM runs WHERE status IN ('pending', 'running', 'suspended')
                 GROUP BY workflow, version ORDER BY workflow, version
INSERT INTO flow_admit (workflow, key) SELECT ?1, ?2
    WHERE EXISTS (SELECT 1 FROM runs WHERE workflow = ?1 AND flow_key = ?2 AND waiting_for IS NOT NULL)

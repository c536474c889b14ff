INSERT INTO flow_admit (workflow, key)
    SELECT DISTINCT workflow, flow_key FROM runs WHERE workflow = ?1 AND waiting_for IS NOT NULL

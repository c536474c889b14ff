UPDATE runs SET status = 'pending', error = NULL, recoveries = 0, updated_at = ?2,
        waiting_for = CASE WHEN flow_key IS NOT NULL THEN 'concurrency' END
    WHERE id = ?1

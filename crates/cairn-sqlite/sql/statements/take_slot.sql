INSERT INTO concurrency_slots (workflow, key, held) VALUES (?1, ?2, 1)
    ON CONFLICT (workflow, key) DO UPDATE SET held = held + 1
    WHERE held < ?3
      AND NOT EXISTS (SELECT 1 FROM runs WHERE workflow = ?1 AND flow_key = ?2 AND waiting_for IS NOT NULL)

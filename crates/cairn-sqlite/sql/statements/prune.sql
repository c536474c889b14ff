SELECT id, workflow, status FROM runs
    WHERE delete_after <= ?1 AND status IN ('completed', 'failed', 'cancelled', 'continued')
    UNION
    SELECT id, workflow, status FROM runs WHERE ?2 IS NOT NULL AND completed_at < ?2
      AND status IN ('completed', 'failed', 'cancelled', 'continued')
    ORDER BY id LIMIT ?3

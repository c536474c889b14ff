UPDATE runs SET wake_at = min(coalesce(wake_at, ?2), ?2)
    WHERE id = ?1 AND status = 'suspended' AND suspend_reason = 'waiting'

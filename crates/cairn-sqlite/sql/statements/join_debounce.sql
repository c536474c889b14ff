UPDATE runs SET input = ?3, updated_at = ?4, wake_at = min(?5, coalesce(debounce_until, ?5))
    WHERE workflow = ?1 AND debounce_key = ?2 AND status = 'suspended' AND suspend_reason = 'debouncing'
    RETURNING id

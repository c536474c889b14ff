UPDATE runs SET request = NULL, request_reason = NULL, epoch = epoch + 1, last_seq = ?2, updated_at = ?3, recoveries = ?5,
        status = 'cancelled', suspend_reason = NULL, error = ?4, completed_at = ?3, wake_at = NULL,
        lease_owner = NULL, lease_expires_at = NULL, delete_after = ?3 + retention_ms, waiting_for = NULL
    WHERE id = ?1

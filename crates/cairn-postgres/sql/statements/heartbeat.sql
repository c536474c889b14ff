UPDATE runs SET lease_expires_at = $1
                 WHERE id = $2 AND epoch = $3 AND lease_owner = $4 AND status = 'running'
                 RETURNING request, request_reason
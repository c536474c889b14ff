WITH free AS (SELECT id FROM runs WHERE id = ANY($2) FOR UPDATE SKIP LOCKED),
                 beat AS (
                     UPDATE runs r SET lease_expires_at = $1
                     FROM unnest($2::text[], $3::bigint[]) AS h(id, epoch)
                     WHERE r.id = h.id AND r.id IN (SELECT id FROM free) AND r.epoch = h.epoch
                       AND r.lease_owner = $4 AND r.status = 'running'
                     RETURNING r.id)
                 SELECT r.id, r.id IN (SELECT id FROM beat), r.request, r.request_reason
                 FROM runs r WHERE r.id IN (SELECT id FROM free)
SELECT flow_admit(workflow, flow_key)
                 FROM (SELECT DISTINCT workflow, flow_key FROM runs WHERE workflow = $1 AND waiting_for IS NOT NULL) g
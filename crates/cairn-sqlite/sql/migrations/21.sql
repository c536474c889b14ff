-- A run's input keys are written by the store as it inserts the run, and only for an input that
-- is an object (statements/index_input.sql, the same selection the trigger made). The trigger made
-- every insert into `runs` keep a statement journal and test its WHEN: about 16,000 more
-- instructions for each start, even of the runs whose input it does not index.
DROP TRIGGER run_inputs_insert;

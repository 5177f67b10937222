-- The secondary indexes by run, thread, task, sender and type move to a database file of their own
-- (clutch.index.db), kept beside the writer by a thread of their own and rebuilt from this log when
-- missing. The `indexed` column stays (dropping it would rewrite the table); nothing reads it now.
DROP INDEX events_run;
DROP INDEX events_thread;
DROP INDEX events_task;
DROP INDEX events_from;
DROP INDEX events_type;
DROP TABLE indexed_upto;

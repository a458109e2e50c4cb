"""All SQL of the dispatcher (SQLAlchemy Core), by concern: `claiming`, `recording`,
`identifiers`, `forwarding`, and the `transitions` they share.

Every status change is a conditional UPDATE on rows the transaction locked first (`FOR UPDATE`,
`SKIP LOCKED` when claiming), so the rows it saw are exactly the rows it moved, and the journal
rows are written in the same transaction. The one exception is the usual record of a submitted
batch (`recording.record_as_claimed`), whose UPDATE's row count proves it moved every parcel the
claim read, or rolls the transaction back for the locking path.
"""

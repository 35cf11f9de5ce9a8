package store

// LoadHistoryTag exposes loadHistoryTag to the store's external tests.
var LoadHistoryTag = loadHistoryTag

// LowerMaxWriteInProgress lowers the bound of s's writes' snapshots to n.
func LowerMaxWriteInProgress(s *Store, n int) { s.maxInProgress = n }

// RowWriterOf exposes rowWriterOf to the store's external tests.
var RowWriterOf = rowWriterOf

// SQLWriteSnapshot exposes sqlWriteSnapshot to the store's external tests.
var SQLWriteSnapshot = sqlWriteSnapshot

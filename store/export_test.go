package store

// LoadHistoryTag exposes loadHistoryTag to the store's external tests.
var LoadHistoryTag = loadHistoryTag

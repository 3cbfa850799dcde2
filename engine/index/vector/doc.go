// Package vector is the embedding layer of the workspace code index: it
// stores chunk embeddings in the index's SQLite database, holds them in
// memory for exact nearest-neighbour search, and fills the store from a
// model provider.
//
//   - Store keeps one vector per (model, chunk content hash) in the table
//     vector_embeddings of a *sql.DB the index owns. A chunk whose text is
//     unchanged has the same hash, so it is never embedded twice.
//   - Matrix holds N unit-length vectors of one dimension, in float32 or in
//     int8 with a per-vector scale, under caller-chosen uint32 ids, and
//     answers exact top-k cosine-similarity queries by a full scan (one
//     bounded min-heap per worker, rows split across GOMAXPROCS workers when
//     the scan is large).
//   - Backfill embeds, batch by batch through engine.Model.Embed, the chunks
//     a Store does not hold yet for a model, writing each batch as it
//     completes so an interrupted run resumes where it stopped.
//
// Exact search is the deliberate choice for workspace-sized indexes: 200,000
// chunks of 768 dimensions scan in tens of milliseconds (see the benchmarks
// in matrix_bench_test.go), with no recall loss and no index to rebuild
// when chunks change.
package vector

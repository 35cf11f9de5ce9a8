package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Content names stored attachment content: its SHA-256 (64 lowercase hex
// digits) and its size in bytes, both computed from the bytes received.
type Content struct {
	SHA256 string
	Size   int64
}

// ContentStore keeps attachment content by SHA-256: content-addressed, so
// the same bytes are kept once. Content is streamed in and out and never
// held whole in memory. The PostgreSQL implementation (PGContent) keeps it
// in chunk rows; an object store can take its place behind this interface
// (docs/decisions/attachment-storage.md).
type ContentStore interface {
	// Put reads r to its end and keeps the bytes. It refuses, keeping
	// nothing, content that is empty (ErrContentEmpty) or longer than
	// maxBytes (ErrContentTooLarge, as soon as byte maxBytes+1 arrives).
	Put(ctx context.Context, r io.Reader, maxBytes int64) (Content, error)
	// Open returns the content with this hash for reading. The reader
	// checks the bytes as it goes and fails with ErrContentCorrupt before
	// returning any byte that does not belong to the content; it fails with
	// ErrContentCorrupt, before handing out the content's last byte, when
	// the whole does not hash to sha (so a reader never sees a complete
	// content that is not the one stored).
	// ErrContentMissing: no such content (never stored, or erased).
	Open(ctx context.Context, sha string) (io.ReadCloser, error)
}

// Content refusals and failures.
var (
	// ErrContentEmpty means the content had no bytes.
	ErrContentEmpty = errors.New("store: attachment content is empty")
	// ErrContentTooLarge means the content was longer than allowed.
	ErrContentTooLarge = errors.New("store: attachment content is longer than allowed")
	// ErrContentMissing means no content with that hash is kept.
	ErrContentMissing = errors.New("store: attachment content is not stored")
	// ErrContentCorrupt means kept content no longer matches its hash.
	ErrContentCorrupt = errors.New("store: attachment content does not match its digest")
)

// ContentChunkBytes is the size of the chunk rows content is kept in.
const ContentChunkBytes = 256 << 10

// PGContent is the ContentStore of the registrum database: content in
// registrum.attachment_blobs and registrum.attachment_chunks.
type PGContent struct{ pool *pgxpool.Pool }

// Content returns the store's content store.
func (s *Store) Content() *PGContent { return &PGContent{pool: s.pool} }

// Put implements ContentStore. The bytes are written in one transaction
// under a staged row with no hash; at the end the row takes the hash, or,
// when the same content is already kept, the transaction is rolled back and
// the kept content answers.
func (c *PGContent) Put(ctx context.Context, r io.Reader, maxBytes int64) (_ Content, err error) {
	ctx, span := startOp(ctx, spanTx, "Content.Put")
	defer func() { endOp(span, err) }()
	var out Content
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return out, fmt.Errorf("store: put content: %w", err)
	}
	defer tx.Rollback(ctx)
	var blob int64
	if err := tx.QueryRow(ctx, `INSERT INTO registrum.attachment_blobs DEFAULT VALUES RETURNING blob_id`).Scan(&blob); err != nil {
		return out, fmt.Errorf("store: put content: %w", err)
	}
	whole := sha256.New()
	buf := make([]byte, ContentChunkBytes)
	for seq := 0; ; seq++ {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			out.Size += int64(n)
			if out.Size > maxBytes {
				return Content{}, ErrContentTooLarge
			}
			whole.Write(buf[:n])
			sum := sha256.Sum256(buf[:n])
			if _, err := tx.Exec(ctx, `INSERT INTO registrum.attachment_chunks (blob_id, seq, chunk_sha256, bytes) VALUES ($1, $2, $3, $4)`,
				blob, seq, sum[:], buf[:n]); err != nil {
				return Content{}, fmt.Errorf("store: put content: %w", err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return Content{}, fmt.Errorf("store: put content: read: %w", rerr)
		}
	}
	if out.Size == 0 {
		return Content{}, ErrContentEmpty
	}
	out.SHA256 = hex.EncodeToString(whole.Sum(nil))
	var kept bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registrum.attachment_blobs WHERE sha256 = $1)`, out.SHA256).Scan(&kept); err != nil {
		return Content{}, fmt.Errorf("store: put content: %w", err)
	}
	if kept {
		return out, nil // the deferred rollback drops the staged copy
	}
	if _, err := tx.Exec(ctx, `UPDATE registrum.attachment_blobs SET sha256 = $2, byte_size = $3 WHERE blob_id = $1`, blob, out.SHA256, out.Size); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return out, nil // the same content committed meanwhile
		}
		return Content{}, fmt.Errorf("store: put content: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Content{}, fmt.Errorf("store: put content: %w", err)
	}
	return out, nil
}

// Open implements ContentStore. The chunks are read by one query whose rows
// arrive as they are consumed; the connection is held until Close.
// Its span ("store.read Content.Open") lasts until Close: the chunks are
// read while the caller reads.
func (c *PGContent) Open(ctx context.Context, sha string) (_ io.ReadCloser, err error) {
	ctx, span := startOp(ctx, spanRead, "Content.Open")
	defer func() {
		if err != nil {
			endOp(span, err)
		}
	}()
	var blob, size int64
	err = c.pool.QueryRow(ctx, `SELECT blob_id, byte_size FROM registrum.attachment_blobs WHERE sha256 = $1`, sha).Scan(&blob, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrContentMissing
	}
	if err != nil {
		return nil, fmt.Errorf("store: open content: %w", err)
	}
	rows, err := c.pool.Query(ctx, `SELECT seq, chunk_sha256, bytes FROM registrum.attachment_chunks WHERE blob_id = $1 ORDER BY seq`, blob)
	if err != nil {
		return nil, fmt.Errorf("store: open content: %w", err)
	}
	return &contentReader{rows: rows, want: sha, size: size, whole: sha256.New(), span: span}, nil
}

// contentReader streams chunk rows, checking each chunk's digest before
// handing out its bytes and the whole content's digest and size at the end.
type contentReader struct {
	rows  pgx.Rows
	want  string
	size  int64
	read  int64
	next  int32
	whole hash.Hash
	cur   []byte
	err   error
	// span is Open's, ended by Close: failed when the content was not read
	// whole and intact (a reader closed early is not a failure).
	span trace.Span
}

func (r *contentReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if !r.rows.Next() {
			if err := r.rows.Err(); err != nil {
				r.err = fmt.Errorf("store: read content: %w", err)
			} else if r.read != r.size || hex.EncodeToString(r.whole.Sum(nil)) != r.want {
				r.err = ErrContentCorrupt
			} else {
				r.err = io.EOF
			}
			continue
		}
		var seq int32
		var sum, b []byte
		if err := r.rows.Scan(&seq, &sum, &b); err != nil {
			r.err = fmt.Errorf("store: read content: %w", err)
			continue
		}
		got := sha256.Sum256(b)
		if seq != r.next || !bytes.Equal(got[:], sum) || r.read+int64(len(b)) > r.size {
			r.err = ErrContentCorrupt
			continue
		}
		r.next++
		r.read += int64(len(b))
		r.whole.Write(b)
		// The chunk that completes the content is handed out only once the
		// whole hashes to sha: a chunk rewritten with a digest of its own
		// passes its own check, and its bytes would otherwise complete a
		// content that is not the one stored (a reader that copies them,
		// like a download with its Content-Length, would deliver it whole).
		if r.read == r.size && hex.EncodeToString(r.whole.Sum(nil)) != r.want {
			r.err = ErrContentCorrupt
			continue
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *contentReader) Close() error {
	r.rows.Close()
	err := r.err
	if err == io.EOF {
		err = nil
	}
	endOp(r.span, err)
	return nil
}

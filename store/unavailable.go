package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means the database cannot be reached or
// is not serving (stopped, restarting, refusing connections, connection
// lost), as opposed to a refusal of the statement: the caller may retry
// later, and nothing is known to be written.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	if pgconn.Timeout(err) && !errors.Is(err, context.Canceled) {
		return true
	}
	// A connection the server closed surfaces as "conn closed" without a
	// typed cause.
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}

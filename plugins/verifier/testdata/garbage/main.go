// Command garbage is a test "verifier" that prints garbage where the
// go-plugin handshake line belongs, then waits.
package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("secret-garbage-text|not|a|handshake|at all")
	time.Sleep(time.Minute)
}

// Command command is a WebAssembly module built in command mode (it exports
// _start, not _initialize): the mistake of building a plugin without
// -buildmode=c-shared, which the runtime refuses at load with how to build a
// reactor module.
package main

import "fmt"

func main() { fmt.Println("hello") }

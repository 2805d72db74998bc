package main

import (
	"syscall"
	"time"
)

// cpuUsage is Sluice's cpu object: CPU seconds, user and system.
type cpuUsage struct {
	UserSeconds   float64 `json:"user_seconds"`
	SystemSeconds float64 `json:"system_seconds"`
	TotalSeconds  float64 `json:"total_seconds"`
}

// processCPU is the process's CPU time so far, every thread included (the client goroutine,
// Pebble's flushes and compactions, Go's runtime and garbage collector), from getrusage
// (microseconds); zero if the call fails.
func processCPU() cpuUsage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuUsage{}
	}
	user := time.Duration(ru.Utime.Nano()).Seconds()
	system := time.Duration(ru.Stime.Nano()).Seconds()
	return cpuUsage{UserSeconds: user, SystemSeconds: system, TotalSeconds: user + system}
}

// since is the CPU time spent since before.
func (c cpuUsage) since(before cpuUsage) cpuUsage {
	return cpuUsage{
		UserSeconds:   c.UserSeconds - before.UserSeconds,
		SystemSeconds: c.SystemSeconds - before.SystemSeconds,
		TotalSeconds:  c.TotalSeconds - before.TotalSeconds,
	}
}

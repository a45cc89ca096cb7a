// Package warm keeps a few session containers made ahead of time, per
// kind of session asked for lately, so that a new session claims one
// instead of waiting for Docker to create and start a container.
//
// What an entry is (a container started and frozen, its network plugged,
// its workspace's mount point ready) and how one is made and thrown away
// is the engine's, behind Maker; this package only decides how many of
// which kind to keep, makes them in the background (none while a
// claimer still works with the entry it took), and hands each out at
// most once. It keeps nothing from one session to the next: an entry
// claimed is the claimer's, never returned; an entry whose kind is no
// longer asked for, or beyond the pool's size, is discarded. It imports
// nothing of the engine.
package warm

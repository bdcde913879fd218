/**
 * The link model of the single-GPU emulation (docs/design.md §9): how long each wire phase of a collective takes on a
 * named link, from measured nccl-tests tables or a constant bus bandwidth. docs/links.md documents every built-in
 * profile's figures and their sources.
 */
package dev.taco.collective.link;

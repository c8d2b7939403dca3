"""Hardware evidence per kernel: what a build and a timed run say about why a kernel is slow
(resources, occupancy, achieved fractions of the measured ceilings, time split, bottleneck), stored
as `profiles` rows and rendered compactly into the prompts."""

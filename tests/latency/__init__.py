"""A latent link: bulk pushes through a rate-limited delay proxy, netem where the kernel has it, TCP segment counts."""

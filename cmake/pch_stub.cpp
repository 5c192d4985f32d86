// Translation unit that carries a precompiled header; intentionally empty.

// Preloaded into every example the docs tests run (node --import): Date.now, the clock tollgate
// reads by default, starts 1.5 s before the next whole hour, so every run crosses a second, a
// minute and an hour boundary near its start and an output that depends on the clock's phase
// fails every time instead of once in a while.
const real = Date.now;
const hour = 3_600_000;
const offset = Math.ceil(real() / hour) * hour - 1_500 - real();
Date.now = () => real() + offset;

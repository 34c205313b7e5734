// Preloaded (node --import) into an example server the docs tests run on the memory store:
// Date.now, the clock tollgate reads by default, stands still from the moment it loads, so a
// test's requests fall in one window wherever a minute ends and the counts it checks are exact.
const at = Date.now();
Date.now = () => at;

// Loaded in <head>, before the page is drawn (a classic script, not a module): the page is laid out for
// scripts from its first paint, so that nothing moves when the modules start (no layout shift).
document.documentElement.classList.add("has-js");

/* removed once the daemon sources land */
int naagent_placeholder(void);
int naagent_placeholder(void) { return 0; }

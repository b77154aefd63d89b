// PyPerf: entry point.
int main() { return 0; }

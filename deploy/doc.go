// Package deploy holds no code: its tests check the repository's
// docker-compose.yml and Dockerfile, which no test can run without a Docker
// engine, as far as they can be checked without one.
package deploy

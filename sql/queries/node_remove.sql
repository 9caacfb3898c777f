DELETE FROM einmal.nodes WHERE id = $1
